// A `&self` method: the key reads a field, the limiter is the service's own.
impl Service {
    /// Fetches an item for the service's tenant.
    #[rate_limit(period = 60, threshold = 5, key = self.tenant, limiter = &self.limiter)]
    pub async fn fetch(&self, id: u32) -> Result<Item, AppError> {
        self.store.get(id).await
    }
}
