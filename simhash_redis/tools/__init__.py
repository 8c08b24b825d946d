"""The tools floor: the demo, the quality evaluation, the layout planner and the embedded server."""
