from django.urls import path

from annotations.experiments import views

app_name = "experiments"

urlpatterns = [
    path("", views.experiment_list, name="experiment_list"),
    path("<int:pk>/", views.experiment_detail, name="experiment_detail"),
    path("<int:pk>/questions/<int:question_id>/", views.experiment_question, name="experiment_question"),
    path("<int:pk>/cancel/", views.experiment_cancel, name="experiment_cancel"),
    path("suites/", views.suite_list, name="suite_list"),
    path("suites/<int:pk>/", views.suite_detail, name="suite_detail"),
    path("suites/<int:pk>/v<int:number>/", views.suite_version, name="suite_version"),
    path("sets/<int:set_id>/candidates/new/", views.candidate_new, name="candidate_new"),
    path("candidates/<int:pk>/", views.candidate_detail, name="candidate_detail"),
    path("candidates/<int:pk>/edit/", views.candidate_edit, name="candidate_edit"),
    path("candidates/<int:pk>/add/", views.candidate_add, name="candidate_add"),
    path("candidates/<int:pk>/items/<int:item_id>/<str:op>/", views.candidate_item, name="candidate_item"),
    path("candidates/<int:pk>/discard/", views.candidate_discard, name="candidate_discard"),
    path("candidates/<int:pk>/publish/", views.candidate_publish, name="candidate_publish"),
    path("candidates/<int:pk>/preview/", views.candidate_preview, name="candidate_preview"),
    path("candidates/<int:pk>/experiment/", views.experiment_new, name="experiment_new"),
    path("from-item/<int:item_id>/", views.exemplar_from_failure, name="exemplar_from_failure"),
]
