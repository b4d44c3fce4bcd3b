"""counterplan's outer ring: command line, gRPC service, model registry, settings, logging."""
