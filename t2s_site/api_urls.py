"""The REST API, mounted at /api/. Each app contributes its routes to one router."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from agent.api import AccountView, DatabaseViewSet, ImportJobViewSet, SessionViewSet, ToolListView
from agent.auth import ThrottledObtainAuthToken
from annotations.exemplars.api import ExemplarSetVersionViewSet, ExemplarSetViewSet, ExemplarViewSet
from annotations.labels.api import LabelViewSet, QueueViewSet
from annotations.runs.api import DatasetViewSet, RunViewSet

router = DefaultRouter()
router.register("databases", DatabaseViewSet, basename="database")
router.register("sessions", SessionViewSet, basename="session")
router.register("imports", ImportJobViewSet, basename="import")
router.register("exemplars", ExemplarViewSet, basename="exemplar")
router.register("exemplar-sets", ExemplarSetViewSet, basename="exemplar-set")
router.register("exemplar-set-versions", ExemplarSetVersionViewSet, basename="exemplar-set-version")
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("runs", RunViewSet, basename="run")
router.register("labels", LabelViewSet, basename="label")
router.register("queues", QueueViewSet, basename="queue")

urlpatterns = [
    path("token/", ThrottledObtainAuthToken.as_view(), name="api_token"),
    path("account/", AccountView.as_view(), name="api_account"),
    path("tools/", ToolListView.as_view(), name="api_tools"),
    path("", include(router.urls)),
]
