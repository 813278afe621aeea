import uuid

from django.db import migrations, models


def give_every_lookup_its_own_token(apps, schema_editor):
    HfModelLookup = apps.get_model("advisor", "HfModelLookup")
    for pk in HfModelLookup.objects.values_list("pk", flat=True):
        HfModelLookup.objects.filter(pk=pk).update(token=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [("advisor", "0005_hfmodellookup_queued_at")]

    operations = [
        migrations.AddField(
            model_name="hfmodellookup",
            name="token",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(give_every_lookup_its_own_token, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="hfmodellookup",
            name="token",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
    ]
