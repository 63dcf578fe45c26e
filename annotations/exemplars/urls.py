from django.urls import path

from . import views

app_name = "exemplars"

urlpatterns = [
    path("", views.exemplar_list, name="exemplar_list"),
    path("new/", views.exemplar_new, name="exemplar_new"),
    path("<int:pk>/", views.exemplar_detail, name="exemplar_detail"),
    path("<int:pk>/edit/", views.exemplar_edit, name="exemplar_edit"),
    path("<int:pk>/lint/", views.exemplar_lint, name="exemplar_lint"),
    path("<int:pk>/submit/", views.exemplar_submit, name="exemplar_submit"),
    path("<int:pk>/review/", views.exemplar_review, name="exemplar_review"),
    path("<int:pk>/fields/", views.step_fields, name="step_fields"),
    path("<int:pk>/steps/add/", views.step_add, name="step_add"),
    path("<int:pk>/final-sql/", views.final_sql, name="final_sql"),
    path("<int:pk>/steps/rerun/", views.steps_rerun, name="steps_rerun"),
    path("<int:pk>/steps/<int:step_id>/<str:op>/", views.step_op, name="step_op"),
    path("promote/session/<int:session_id>/", views.promote_session, name="promote_session"),
    path("sets/", views.set_list, name="set_list"),
    path("sets/new/", views.set_new, name="set_new"),
    path("sets/upload/", views.set_upload, name="set_upload"),
    path("sets/<int:set_id>/", views.set_detail, name="set_detail"),
    path("sets/<int:set_id>/publish/", views.set_publish, name="set_publish"),
    path("sets/<int:set_id>/diff/", views.version_diff, name="version_diff"),
    path("sets/<int:set_id>/v<int:number>/", views.version_detail, name="version_detail"),
    path("sets/<int:set_id>/v<int:number>/preview/", views.version_preview, name="version_preview"),
    path("sets/<int:set_id>/v<int:number>/export/", views.version_export, name="version_export"),
]
