// One limit with a rate chosen per call, a cost and an exemption: a composite check of one
// limit, its key the plain form's plus the rate's window.
#[rate_limit(rate = plan.rate(), key = account.id, cost = items.len(), exempt = caller.is_internal())]
async fn upload(plan: &Plan, account: &Account, caller: &Caller, items: &[Item]) -> Result<(), AppError> {
    Ok(())
}
