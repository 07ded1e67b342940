"""Pure figure functions: arrays + labels -> plotly figures. Never imports streamlit or torch."""
