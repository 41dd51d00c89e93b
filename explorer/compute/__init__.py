"""The compute layer: pure functions on NumPy arrays (no torch, no Streamlit)."""
