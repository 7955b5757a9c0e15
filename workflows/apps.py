from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the example workflows' Python functions and the system checks.
        from workflows import checks, runtime  # noqa: F401 - checks registers the system checks
        from workflows.examples import functions  # noqa: F401
        from workflows.store import state_reads  # noqa: F401 - instance.context reads through it
        from workflows.triggers import notifications

        # The notifications act on committed units: the runtime runs them with its effects.
        runtime.add_commit_hook(notifications.after_commit_notices)

        self._import_extra_functions()
        # Metrics in every process; spans only when an OTLP endpoint is configured.
        from workflows.observability import setup as observability

        observability.install()

    @staticmethod
    def _import_extra_functions() -> None:
        """Import the modules named in STEADYFLOW_EXTRA_FUNCTIONS: a deployment's (or the tests') own
        `python` node functions. Workers only know functions registered at start-up."""
        import importlib

        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured

        for module in settings.STEADYFLOW.get("EXTRA_FUNCTION_MODULES", []):
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ImproperlyConfigured(
                    f"STEADYFLOW_EXTRA_FUNCTIONS names {module!r}, which cannot be imported: {exc}") from None
