from django import forms

from agent.models import Database, name_validator


class DatabaseRegisterForm(forms.Form):
    name = forms.CharField(max_length=100, validators=[name_validator],
                           help_text="Short name used in URLs and on the command line, e.g. chinook.")
    location = forms.CharField(
        max_length=2000,
        help_text="Absolute path of a SQLite file on the server, or a PostgreSQL DSN "
        "(postgresql://reader:password@host:5432/dbname). Passwords are never shown back.",
        widget=forms.TextInput(attrs={"placeholder": "/data/shop.sqlite or postgresql://reader@host/db"}),
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if Database.objects.filter(name=name).exists():
            raise forms.ValidationError("A database with this name is already registered.")
        return name
