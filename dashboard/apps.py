from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from dashboard.security import login_throttle

        login_throttle.connect_signals()
