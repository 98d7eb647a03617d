"""kavka's web console: a small web application that shows and changes a cluster through the
Kafka protocol only (kavka's own admin client), so it also works, minus the kavka-only pages,
against any Kafka-compatible cluster.

Stack: Starlette + uvicorn, server-rendered Jinja2 templates, one vendored stylesheet and one
small vanilla script (no build step). `app.create_app` builds the application; `views` reads
and changes the cluster; `kavka console` (kavka.cli.console) serves it.
"""
