from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from config.views import favicon, healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Browsers ask for /favicon.ico on pages without a <link rel="icon"> (the admin's).
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    # The login page says how accounts are obtained: single sign-on, or ask staff.
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(
            extra_context={
                "sso": settings.AUTH_REMOTE_USER,
                "staff_contact": (settings.STAFF_NOTIFICATION_EMAILS or [""])[0],
            }
        ),
        name="login",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("catalog/", include("catalog.urls")),
    path("", include("allocations.urls")),
    path("", include("advisor.urls")),
]

handler400 = "config.views.bad_request"
handler403 = "config.views.permission_denied"
handler404 = "config.views.page_not_found"
handler500 = "config.views.server_error"
