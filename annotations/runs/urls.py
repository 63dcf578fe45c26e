from django.urls import path

from annotations.runs import views

app_name = "runs"

urlpatterns = [
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("datasets/<str:name>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<str:name>/run/", views.run_launch, name="run_launch"),
    path("datasets/<str:name>/estimate/", views.run_estimate, name="run_estimate"),
    path("runs/", views.run_list, name="run_list"),
    path("runs/compare/", views.run_compare, name="run_compare"),
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/evaluate/", views.run_reevaluate, name="run_reevaluate"),
    path("runs/<int:pk>/items/<int:item_id>/", views.run_item, name="run_item"),
    path("runs/<int:pk>/missing/", views.run_missing, name="run_missing"),
    path("runs/<int:pk>/<str:action>/", views.run_control, name="run_control"),
]
