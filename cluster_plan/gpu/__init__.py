"""GPUs: which NVIDIA driver each GPU model gets, and how a GPU's health is judged."""
