from django.urls import path

from advisor import api, lookup_views

app_name = "advisor"
urlpatterns = [
    path("api/estimate", api.estimate_api, name="api-estimate"),
    path("lookups/", lookup_views.lookup_start, name="lookup-start"),
    path("lookups/<int:lookup_id>/", lookup_views.lookup_detail, name="lookup-detail"),
    path("models/suggest", lookup_views.model_suggest, name="model-suggest"),
]
