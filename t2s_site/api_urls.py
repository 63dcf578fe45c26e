"""The REST API, mounted at /api/. Each app contributes its routes to one router."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from agent.api import AccountView, DatabaseViewSet, SessionViewSet
from agent.auth import ThrottledObtainAuthToken
from annotations.labels.api import LabelViewSet

router = DefaultRouter()
router.register("databases", DatabaseViewSet, basename="database")
router.register("sessions", SessionViewSet, basename="session")
router.register("labels", LabelViewSet, basename="label")

urlpatterns = [
    path("token/", ThrottledObtainAuthToken.as_view(), name="api_token"),
    path("account/", AccountView.as_view(), name="api_account"),
    path("", include(router.urls)),
]
