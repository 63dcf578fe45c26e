from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from agent.auth import ThrottledAdminAuthenticationForm, ThrottledAuthenticationForm

# The admin's own login page says so too when sign-in is locked.
admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    path("accounts/login/", login_not_required(
        auth_views.LoginView.as_view(authentication_form=ThrottledAuthenticationForm)), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("t2s_site.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api_schema"), name="api_docs"),
    path("exemplars/", include("annotations.exemplars.urls")),
    path("experiments/", include("annotations.experiments.urls")),
    path("", include("annotations.runs.urls")),
    path("", include("annotations.labels.urls")),
    path("", include("agent.urls")),
]

# Refusals and errors are pages of the app (navigation, the reason, who can grant access); JSON under /api/.
handler403 = "agent.views.errors.permission_denied"
handler404 = "agent.views.errors.page_not_found"
handler500 = "agent.views.errors.server_error"
