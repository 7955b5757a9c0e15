import sys

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.urls import path
from django.views.defaults import page_not_found, server_error
from django.views.generic import RedirectView

from dashboard.api import core as api
from dashboard.api import (
    daily_api,
    demo,
    demo_mcp,
    editor_api,
    evaluations,
    instance_api,
    mcp_tools,
    planner_api,
    review_api,
    review_bulk,
    v1,
)
from dashboard.api.http import error as api_error
from dashboard.api.metrics_view import metrics_view
from dashboard.database_away import DATABASE_AWAY_ERRORS, RETRY_AFTER_S, database_away
from dashboard.pages import (
    credential_views,
    editor,
    evaluation_views,
    meta,
    report_views,
    review_links,
    review_views,
    token_views,
    trigger_views,
    views,
)
from dashboard.security.login_throttle import ThrottledAdminAuthenticationForm, ThrottledAuthenticationForm

# Both login pages say when a login is refused because of too many failures (dashboard/security/login_throttle.py).
# The admin modules are discovered here, when the URLs load (dashboard/settings.py: SimpleAdminConfig keeps
# them out of the worker and scheduler processes, which never serve the admin).
admin.autodiscover()
admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("workflows/", editor.workflow_list, name="workflow-list"),
    path("workflows/<slug:slug>/", views.definition_detail, name="definition"),
    path("workflows/<slug:slug>/evaluations/", evaluation_views.evaluations_page, name="evaluations"),
    path("evaluations/<int:evaluation_id>/", evaluation_views.evaluation_page, name="evaluation"),
    path("api/workflows/<slug:slug>/datasets", evaluations.dataset_list, name="api-datasets"),
    path("api/workflows/<slug:slug>/datasets/<slug:name>", evaluations.dataset_export, name="api-dataset-export"),
    path("api/workflows/<slug:slug>/evaluations", evaluations.evaluation_list, name="api-evaluations"),
    path("api/evaluations/<int:evaluation_id>", evaluations.evaluation_detail, name="api-evaluation"),
    path("api/evaluations/<int:evaluation_id>/compare/<int:other_id>", evaluations.evaluation_compare,
         name="api-evaluation-compare"),
    path("workflows/<slug:slug>/edit/", editor.editor, name="workflow-editor"),
    path("workflows/<slug:slug>/duplicate", editor.duplicate, name="workflow-duplicate"),
    path("workflows/<slug:slug>/archive", editor.archive, name="workflow-archive"),
    path("workflows/<slug:slug>/triggers/", trigger_views.workflow_triggers, name="workflow-triggers"),
    # Public, authenticated by its HMAC signature (workflows/triggers/signing.py), CSRF-exempt.
    path("hooks/<slug:slug>/<str:hook_id>", trigger_views.webhook_receive, name="webhook-receive"),
    path("instances/", views.instance_list, name="instance-list"),
    path("instances/<int:instance_id>/", views.instance_detail, name="instance"),
    path("instances/<int:instance_id>/report/", report_views.report_page, name="instance-report"),
    path("api/node-types", api.node_types, name="api-node-types"),
    path("api/meta", meta.meta, name="api-meta"),
    path("api/validate", api.validate, name="api-validate"),
    path("api/functions", api.functions, name="api-functions"),
    path("api/workflows/<slug:slug>/instances", api.start_instance, name="api-start"),
    path("api/workflows/<slug:slug>/instances/bulk", api.start_instances, name="api-start-many"),
    path("api/workflows/<slug:slug>/versions", editor_api.versions, name="api-editor-versions"),
    path("api/workflows/<slug:slug>/versions/<int:number>", editor_api.version_detail, name="api-editor-version"),
    path("api/workflows/<slug:slug>/versions/<int:number>/restore", editor_api.restore,
         name="api-editor-restore"),
    path("api/workflows/<slug:slug>/diff", editor_api.diff, name="api-editor-diff"),
    path("api/workflows/<slug:slug>/nodes/<str:node_id>/test", editor_api.test_node, name="api-editor-test-node"),
    path("api/workflows/<slug:slug>/plan", planner_api.plan, name="api-editor-plan"),
    path("api/expressions/check", editor_api.check_expression, name="api-check-expression"),
    path("api/mcp/servers", mcp_tools.servers, name="api-mcp-servers"),
    path("api/mcp/servers/<str:name>/tools", mcp_tools.tools, name="api-mcp-tools"),
    path("api/instances/<int:instance_id>", api.instance, name="api-instance"),
    path("api/instances/<int:instance_id>/events", api.instance_events, name="api-instance-events"),
    path("api/instances/<int:instance_id>/report", report_views.instance_report, name="api-instance-report"),
    path("api/instances/<int:instance_id>/steps", instance_api.instance_steps, name="api-instance-steps"),
    path("api/instances/<int:instance_id>/cancel", instance_api.cancel, name="api-instance-cancel"),
    path("api/instances/<int:instance_id>/retry", instance_api.retry, name="api-instance-retry"),
    path("api/instances/<int:instance_id>/rerun", instance_api.rerun, name="api-instance-rerun"),
    path("api/instances/<int:instance_id>/review", instance_api.review_decide, name="api-instance-review"),
    path("api/dashboard", instance_api.dashboard_stats, name="api-dashboard"),
    path("api/dashboard/daily", daily_api.daily, name="api-dashboard-daily"),
    path("credentials/", credential_views.credential_list, name="credential-list"),
    path("credentials/<str:name>/", credential_views.credential_edit, name="credential-edit"),
    path("credentials/<str:name>/delete", credential_views.credential_delete, name="credential-delete"),
    path("review/", review_views.review_list, name="review-list"),
    path("review/<int:item_id>/", review_views.review_detail, name="review-detail"),
    path("review/next/", review_views.review_next, name="review-next"),
    path("review/act/<str:token>/", review_links.review_action, name="review-action"),
    path("api/reviews", review_api.reviews, name="api-reviews"),
    path("api/reviews/decide", review_bulk.decide_many, name="api-reviews-decide"),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=ThrottledAuthenticationForm),
         name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # The versioned REST API (dashboard/api/v1/): its own URL conf, namespace "v1".
    path("api/v1/", v1.urls()),
    path("api/docs", RedirectView.as_view(url="/api/v1/docs"), name="api-docs"),
    path("account/tokens/", token_views.token_list, name="api-tokens"),
    path("account/tokens/<int:token_id>/revoke", token_views.revoke, name="api-token-revoke"),
    # Last among the API routes: an unknown /api/ path answers JSON, not the HTML 404 page.
    path("api/<path:rest>", api.not_found, name="api-not-found"),
]

# Static files from the app server only when DEBUG (make run, browser tests); production serves them
# from STATIC_ROOT (collectstatic) in front of daphne.
urlpatterns += staticfiles_urlpatterns()

if settings.STEADYFLOW["DEMO_ENDPOINTS"]:
    urlpatterns += [
        path("demo/research/<slug:topic_kind>", demo.research, name="demo-research"),
        path("demo/ledger/<slug:action>", demo.ledger, name="demo-ledger"),
        path("demo/notify/<slug:action>", demo.ledger, name="demo-notify"),
        path("demo/mcp", demo_mcp.mcp, name="demo-mcp"),
    ]


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A path no pattern matches at all (the API's catch-alls do not match a newline, for one): the
    v1 API still answers a problem document, the older API JSON."""
    if request.path.startswith("/api/v1/"):
        return v1.not_found(request)
    if request.path.startswith("/api/"):
        return api.not_found(request)
    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    """An uncaught exception. When the database is away (crashed, restarting, refusing connections,
    out of disk: Django's OperationalError or InterfaceError), say so with a 503 and Retry-After rather
    than a bare 500: the web process stays up and the page works again as soon as the database is
    back (docs/guarantees-faults.md). Nothing here may read the database: the page is rendered
    without the request's context (no user, no session)."""
    exc = sys.exc_info()[1]
    if exc is None or not isinstance(exc, DATABASE_AWAY_ERRORS):
        return server_error(request)
    database_away.failed(exc)  # once per episode (dashboard/database_away.py), not a traceback per request
    message = "The database is not answering; this page works again as soon as it is back."
    if request.path.startswith("/api/"):
        response: HttpResponse = api_error(503, message)
    else:
        response = HttpResponse(loader.get_template("503.html").render({"message": message}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    response._has_been_logged = True  # Django's own mark: its log_response then skips this response
    return response
