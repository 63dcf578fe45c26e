"""The REST API, mounted at /api/. Each app contributes its routes to one router."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from agent.api import (
    AccountView,
    DatabaseViewSet,
    ImportJobViewSet,
    SessionViewSet,
    StrategyListView,
    ToolListView,
    WorkspaceViewSet,
)
from agent.auth import ThrottledObtainAuthToken
from annotations.exemplars.api import ExemplarSetVersionViewSet, ExemplarSetViewSet, ExemplarViewSet
from annotations.experiments.api import (
    CandidateViewSet,
    ExemplarFromFailureView,
    ExperimentViewSet,
    SuiteVersionViewSet,
    SuiteViewSet,
)
from annotations.labels.api import LabelViewSet, QueueViewSet
from annotations.runs.api import DatasetViewSet, RunViewSet

# Routes outside the router, listed on the API root beside the resources: (key, URL name).
EXTRA_ROOT_ROUTES = {"tools": "api_tools", "token": "api_token", "account": "api_account",
                     "exemplars-from-failures": "exemplar-from-failure"}


class StudioRouter(DefaultRouter):
    """The browsable root (``GET /api/``) lists every route a client can start from, not only the viewsets."""

    def get_api_root_view(self, api_urls=None):
        list_name = self.routes[0].name
        root = {prefix: list_name.format(basename=basename) for prefix, _viewset, basename in self.registry}
        return self.APIRootView.as_view(api_root_dict={**root, **EXTRA_ROOT_ROUTES})


router = StudioRouter()
router.register("databases", DatabaseViewSet, basename="database")
router.register("workspaces", WorkspaceViewSet, basename="workspace")
router.register("sessions", SessionViewSet, basename="session")
router.register("imports", ImportJobViewSet, basename="import")
router.register("exemplars", ExemplarViewSet, basename="exemplar")
router.register("exemplar-sets", ExemplarSetViewSet, basename="exemplar-set")
router.register("exemplar-set-versions", ExemplarSetVersionViewSet, basename="exemplar-set-version")
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("runs", RunViewSet, basename="run")
router.register("labels", LabelViewSet, basename="label")
router.register("queues", QueueViewSet, basename="queue")
router.register("suites", SuiteViewSet, basename="suite")
router.register("suite-versions", SuiteVersionViewSet, basename="suite-version")
router.register("candidates", CandidateViewSet, basename="candidate")
router.register("experiments", ExperimentViewSet, basename="experiment")

urlpatterns = [
    path("token/", ThrottledObtainAuthToken.as_view(), name="api_token"),
    path("account/", AccountView.as_view(), name="api_account"),
    path("tools/", ToolListView.as_view(), name="api_tools"),
    path("strategies/", StrategyListView.as_view(), name="api_strategies"),
    path("exemplars-from-failures/", ExemplarFromFailureView.as_view(), name="exemplar-from-failure"),
    path("", include(router.urls)),
]
