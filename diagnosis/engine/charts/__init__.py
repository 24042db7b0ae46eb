"""Charts of a trace drawn as inline SVG: pure geometry, no Django, no I/O."""
