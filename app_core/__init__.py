"""The app's core without Streamlit: the share-link codec, page schemas, byte-bounded caches, jobs, the model
pool and models folder, example texts. The pages in app_pages/ are a thin Streamlit layer over it."""
