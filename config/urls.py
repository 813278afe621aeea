from django.contrib import admin
from django.urls import include, path

from config.views import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("catalog/", include("catalog.urls")),
    path("", include("allocations.urls")),
    path("", include("advisor.urls")),
]
