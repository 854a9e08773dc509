"""Grade Score (Iourovitski): an LLM judge's order bias and choice stability."""
