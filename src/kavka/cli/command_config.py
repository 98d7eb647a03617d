"""`--command-config <client.properties>`: how the kavka CLI reaches a secured listener, with the
properties file Kafka's own tools take (a Java client's keys). The parsing lives in
kavka.client_properties, shared with the Spark connector; read once per CLI command.
"""

from kavka.client_properties import CommandConfigError, client_security, load_command_config

__all__ = ["CommandConfigError", "client_security", "load_command_config"]
