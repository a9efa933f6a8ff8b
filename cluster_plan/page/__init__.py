"""The small kit every HTML page of the project is drawn with: the page shell (one
self-contained file: its style inline, no script), tables, the pair heatmap and the trend line
(inline SVG). Each page keeps its own style sheet; the kit escapes what is text."""
