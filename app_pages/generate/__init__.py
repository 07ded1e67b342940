"""The Generate page (page.py): its generations as shared background jobs asked for before the frame is drawn
(jobs.py) and the KV cache's size and time measured live (kv_cache.py)."""
