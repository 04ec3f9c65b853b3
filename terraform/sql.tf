resource "google_sql_database_instance" "main" {
  name                = "gleaner"
  region              = var.region
  database_version    = "POSTGRES_16"
  deletion_protection = var.deletion_protection

  settings {
    tier              = var.db_tier
    disk_size         = var.db_disk_gb
    disk_autoresize   = true
    availability_type = "ZONAL"

    # Functions log in as their service accounts (IAM database authentication): no passwords.
    database_flags {
      name  = "cloudsql.iam_authentication"
      value = "on"
    }

    # Public IP without authorized networks: only the Cloud SQL connector (IAM-checked, TLS) gets in.
    ip_configuration {
      ipv4_enabled = true
      ssl_mode     = "ENCRYPTED_ONLY"
    }

    backup_configuration {
      enabled                        = true
      point_in_time_recovery_enabled = true
    }
  }
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
