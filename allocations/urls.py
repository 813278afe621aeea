from django.urls import path

from allocations import views

app_name = "allocations"
urlpatterns = [
    path("requests/", views.request_list, name="request-list"),
    path("requests/new/<uuid:session_id>/", views.request_create, name="request-create"),
    path("requests/<uuid:pk>/", views.request_detail, name="request-detail"),
    path("requests/<uuid:pk>/edit/", views.request_edit, name="request-edit"),
    path("requests/<uuid:pk>/withdraw/", views.request_withdraw, name="request-withdraw"),
    path(
        "requests/<uuid:pk>/measurements/",
        views.measurement_upload,
        name="measurement-upload",
    ),
    path("trial-run/trial_run.py", views.trial_run_helper, name="trial-run-helper"),
]
