package serve

import (
	_ "embed"
	"net/http"
	"strconv"
)

// The OpenAPI document of the routes, where TEI serves its own: the JSON
// at /api-doc/openapi.json and a Swagger UI page at /docs (its scripts
// from a CDN, as TEI's utoipa page loads its own assets).

//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	w.Write(openAPIDoc)
	return nil
}

const swaggerPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>int8bert serve: API</title>
<link rel="stylesheet" href="https://unpkg.com/swagger-ui-dist@5/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="https://unpkg.com/swagger-ui-dist@5/swagger-ui-bundle.js" crossorigin></script>
<script>
window.onload = () => { window.ui = SwaggerUIBundle({url: "/api-doc/openapi.json", dom_id: "#swagger-ui"}); };
</script>
</body>
</html>
`

func (s *Server) swaggerUI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(swaggerPage))
	return nil
}
