"""Request handlers, one module per API family: handle_<api>(node, ctx, request) -> response."""
