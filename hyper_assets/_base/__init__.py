"""What every layer uses: atomic files, saved formats, environment variables and secrets,
object-store settings."""
