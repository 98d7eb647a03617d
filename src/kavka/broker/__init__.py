"""The broker: composition root, asyncio server, request handlers, node lifecycle."""
