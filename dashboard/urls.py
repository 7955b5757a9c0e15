from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard import api, demo, views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("workflows/<slug:slug>/", views.definition_detail, name="definition"),
    path("instances/<int:instance_id>/", views.instance_detail, name="instance"),
    path("api/node-types", api.node_types, name="api-node-types"),
    path("api/validate", api.validate, name="api-validate"),
    path("api/workflows/<slug:slug>/instances", api.start_instance, name="api-start"),
    path("api/instances/<int:instance_id>", api.instance, name="api-instance"),
    path("api/instances/<int:instance_id>/events", api.instance_events, name="api-instance-events"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]

if settings.STEADYFLOW["DEMO_ENDPOINTS"]:
    urlpatterns += [
        path("demo/research/<slug:topic_kind>", demo.research, name="demo-research"),
        path("demo/ledger/<slug:action>", demo.ledger, name="demo-ledger"),
        path("demo/notify/<slug:action>", demo.ledger, name="demo-notify"),
    ]
