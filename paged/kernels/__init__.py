"""Faster paged decode kernels, registered behind `paged_attention_decode(impl=...)`."""
