//! What a handler reads and answers: the JSON body ([`Input`]) and the query ([`Params`]), their
//! mistakes as 400 `InvalidInput`; its answer ([`Out`]) with [`ok`] or [`created`].

use axum::Json;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A handler's answer.
pub type Out<T> = Result<(StatusCode, Json<T>), ApiError>;

/// 200 with `v`.
pub fn ok<T>(v: T) -> Out<T> {
    Ok((StatusCode::OK, Json(v)))
}

/// 201 with `v`.
pub fn created<T>(v: T) -> Out<T> {
    Ok((StatusCode::CREATED, Json(v)))
}

/// A JSON body (an empty body reads as `{}`), its errors as 400 `InvalidInput`.
pub struct Input<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Input<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), e.body_text()))?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { &bytes };
        // What a person sends is read strictly: an unknown field is a mistake, at every level,
        // named with the path of the object that holds it.
        gce_backend_jobs::unknown::strictly(|| {
            let mut de = serde_json::Deserializer::from_slice(text);
            let v = serde_path_to_error::deserialize(&mut de)
                .map_err(|e| (e.path().to_string(), e.into_inner()))?;
            de.end().map(|()| Input(v)).map_err(|e| (".".to_owned(), e))
        })
        .map_err(|(path, e)| match path.as_str() {
            "." => ApiError::invalid(format!("body: {e}")),
            _ => ApiError::invalid(format!("body: {path}: {e}")),
        })
    }
}

/// Query parameters, their errors as 400 `InvalidInput`.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(q).map(Params).map_err(|e| ApiError::invalid(format!("query: {e}")))
    }
}
