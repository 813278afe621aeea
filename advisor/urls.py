from django.urls import path

from advisor import api

app_name = "advisor"
urlpatterns = [
    path("api/estimate", api.estimate_api, name="api-estimate"),
]
