"""The Train page (page.py) and its runs as background jobs shared by every session (runs.py)."""
