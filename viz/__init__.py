"""Plotly figure builders: pure functions, data in, `go.Figure` out. Never imports streamlit.

    colors     Okabe–Ito palette, one stable colour and label per sequence id
    pool       the physical pool grid (blocks × offsets), owners, highlights, hover = the address chain
    chain      the address chain of one token as a diagram
    attention  attention weights (heads × tokens), the logical K/V strip, causal mask, diff panels
    mapping    logical → physical mapping of several sequences' block tables

Values that tests read back are passed to plotly as lists (plotly 7 stores numpy arrays as binary).
"""
