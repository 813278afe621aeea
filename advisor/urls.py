from django.urls import path

from advisor import lookup_views

app_name = "advisor"
urlpatterns: list = [
    path("lookups/", lookup_views.lookup_start, name="lookup-start"),
    path("lookups/<int:lookup_id>/", lookup_views.lookup_detail, name="lookup-detail"),
    path("models/suggest", lookup_views.model_suggest, name="model-suggest"),
]
