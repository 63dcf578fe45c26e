from django.urls import path

from annotations.labels import views

app_name = "labels"

urlpatterns = [
    path("labels/", views.overview, name="overview"),
    path("labels/items/<int:item_id>/", views.review, name="review"),
    path("labels/items/<int:item_id>/start/", views.review_start, name="review_start"),
    path("labels/items/<int:item_id>/leave/", views.review_leave, name="review_leave"),
    path("labels/items/<int:item_id>/toggle/<int:category_id>/", views.label_toggle, name="toggle"),
    path("labels/items/<int:item_id>/note/", views.label_note, name="note"),
    path("labels/items/<int:item_id>/corrected/", views.label_corrected, name="corrected"),
    path("labels/items/<int:item_id>/adjudicate/", views.adjudicate, name="adjudicate"),
    path("labels/items/<int:item_id>/final/<int:category_id>/", views.final_toggle, name="final_toggle"),
    path("labels/items/<int:item_id>/reveal/", views.reveal, name="reveal"),
    path("labels/queues/", views.queue_list, name="queue_list"),
    path("labels/queues/<int:pk>/", views.queue_detail, name="queue_detail"),
    path("labels/queues/<int:pk>/next/", views.queue_next, name="queue_next"),
    path("labels/runs/<int:pk>/", views.dashboard, name="dashboard"),
    path("labels/runs/<int:pk>/questions/", views.questions, name="questions"),
    path("labels/runs/<int:pk>/agreement/", views.agreement, name="agreement"),
    path("labels/runs/<int:pk>/adjudication/", views.adjudication, name="adjudication"),
    path("labels/runs/<int:pk>/charts/<slug:chart>.csv", views.chart_csv, name="chart_csv"),
    path("labels/runs/<int:pk>/export.<str:fmt>", views.export, name="export"),
]
