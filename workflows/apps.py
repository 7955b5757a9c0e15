from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the example workflows' Python functions and the system checks.
        from workflows import checks  # noqa: F401
        from workflows.examples import functions  # noqa: F401
