"""AppTest runs the app in this process: its model passes keep the process's torch thread count, so the pages'
numbers equal the reference computations in the tests to the last bit (the server's default, all cores but one,
would change torch's reduction order for every later test in the process; app_pages/_caches.compute_threads)."""
import os

import torch

os.environ.setdefault("ATLAS_TORCH_THREADS", str(torch.get_num_threads()))
