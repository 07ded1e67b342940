"""Native kernels (C, built at first use, see build.py) with the Python calls that run them."""
