from django.urls import path

from advisor import api, chart_views, lookup_views, result_views, views
from advisor.embedding import embeddable

app_name = "advisor"

# The same views twice: once as ordinary pages, once under /embed/ for the intranet frame
# (minimal chrome, framable only by EMBED_ALLOWED_ORIGINS).
_flow = [
    ("", views.flow_start, "start"),
    ("a/<uuid:session_id>/", views.flow_resume, "resume"),
    ("a/<uuid:session_id>/step/<str:step>/", views.flow_step, "step"),
    ("a/<uuid:session_id>/result/", result_views.flow_result, "result"),
]

urlpatterns = [
    *(path(route, view, name=name) for route, view, name in _flow),
    *(
        path(f"embed/{route}", embeddable(view), {"embed": True}, name=f"embed-{name}")
        for route, view, name in _flow
    ),
    path("chart/", chart_views.chart_view, name="chart"),
    path("api/estimate", api.estimate_api, name="api-estimate"),
    path("a/<uuid:session_id>/chart/", chart_views.session_chart_view, name="session-chart"),
    path("lookups/", lookup_views.lookup_start, name="lookup-start"),
    path("lookups/<uuid:token>/", lookup_views.lookup_detail, name="lookup-detail"),
    path("models/suggest", lookup_views.model_suggest, name="model-suggest"),
]
