"""The later chapters' data and math (window, swap, speculative, beam selection, memory, the vLLM twin)."""
