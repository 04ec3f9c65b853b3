resource "google_sql_database_instance" "main" {
  name             = "gleaner"
  region           = var.region
  database_version = "POSTGRES_16"
  # PostgreSQL 16 defaults to ENTERPRISE_PLUS, which refuses db-custom-* tiers
  # (terraform-provider-google issue 20498): the edition must be named.
  deletion_protection = var.deletion_protection

  settings {
    edition           = "ENTERPRISE"
    tier              = var.db_tier
    disk_size         = var.db_disk_gb
    disk_autoresize   = true
    availability_type = "ZONAL"

    # Functions log in as their service accounts (IAM database authentication): no passwords.
    database_flags {
      name  = "cloudsql.iam_authentication"
      value = "on"
    }

    # Named, not left to the tier's default, because the functions' pools are sized against it
    # (the precondition below).
    database_flags {
      name  = "max_connections"
      value = tostring(var.db_max_connections)
    }

    # Public IP without authorized networks: only the Cloud SQL connector (IAM-checked, TLS) gets in.
    ip_configuration {
      ipv4_enabled = true
      ssl_mode     = "ENCRYPTED_ONLY"
    }

    # An erased row lives on in the backups and in the WAL kept for point-in-time recovery until they
    # expire: these two bound how long an erasure takes to leave the cloud (docs/provenance.md).
    backup_configuration {
      enabled                        = true
      point_in_time_recovery_enabled = true
      transaction_log_retention_days = var.db_log_retention_days
      backup_retention_settings {
        retained_backups = var.db_retained_backups
        retention_unit   = "COUNT"
      }
    }
  }

  # The functions' pools times their max instances must fit (functions.tf, docs/deployment.md):
  # a plan that would let them exhaust max_connections fails here.
  lifecycle {
    precondition {
      condition     = local.db_connections <= var.db_max_connections - local.db_reserved
      error_message = "Functions' max instances x (pool + overflow) plus the migrator and headroom exceed max_connections."
    }
  }

  depends_on = [google_project_service.enabled]
}

resource "google_sql_database" "gleaner" {
  name     = "gleaner"
  instance = google_sql_database_instance.main.name
}

resource "google_sql_user" "fn" {
  for_each = toset(local.db_functions)
  name     = trimsuffix(google_service_account.fn[each.key].email, ".gserviceaccount.com")
  instance = google_sql_database_instance.main.name
  type     = "CLOUD_IAM_SERVICE_ACCOUNT"
}
