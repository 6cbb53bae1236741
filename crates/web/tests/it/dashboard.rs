//! The dashboard in a real headless Chromium (placeholder until the page exists).
