"""`/docs` without the internet: Swagger UI's page with its script, stylesheet and icon served
by the app from the `swagger-ui-bundle-v2` package (Swagger UI 5, which reads OpenAPI 3.1),
instead of FastAPI's default CDN links, which leave the page blank offline."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs/assets"


def install_docs(app: FastAPI) -> None:
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_path), name="swagger-ui-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=openapi_url, title=f"{app.title} - docs",
                                   swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
                                   oauth2_redirect_url=redirect_url)

    @app.get(redirect_url, include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
