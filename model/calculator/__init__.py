"""The exact parameter / memory / FLOPs calculator for any decoder shape."""
