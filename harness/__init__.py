"""What the tests and bench/ share: tiny models written with gguf's writer, the app / Redis / HAProxy / Chromium
launched for real, Streamlit's websocket protocol spoken by a script. Never imports tests or bench."""
